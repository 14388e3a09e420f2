int main(void)
{
    int unused_variable;    /* -Wall: unused variable */
    return 0;
}
