export type Dialect = 'sqlite' | 'postgres'
